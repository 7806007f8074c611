"""The runtime: load an AOTInductor package and run it (container → ownership → program)."""
