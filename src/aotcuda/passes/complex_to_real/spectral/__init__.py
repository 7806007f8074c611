"""FFTs as real math on pairs: a plan per static length (plan.py), its tables as program constants
(tables.py), and the transforms built from small DFT products (transform.py)."""
