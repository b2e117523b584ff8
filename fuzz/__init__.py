"""Fuzzing harnesses (atheris); run by ``make fuzz``, never by ``make test``."""
