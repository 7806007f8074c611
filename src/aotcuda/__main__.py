"""``python -m aotcuda ...``: the same command as ``aotcuda ...``."""

from aotcuda.cli import main

if __name__ == "__main__":
    main(prog_name="aotcuda")
