"""The common driver: validate every registered variant against torch, time it, tabulate and write results.

It knows the registry and the problems, never a kernel module by name.
"""
