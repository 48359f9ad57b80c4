"""Subscription workloads (paper 001, Sect. 6.1)."""
