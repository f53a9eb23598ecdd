"""Measurements of the GPU itself that the driver records with a run: the idle global-memory latency
(``latency``, a pointer chase) that Little's law in the depth plot is drawn from."""
