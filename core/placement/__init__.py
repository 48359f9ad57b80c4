"""Subscription placement: LASP (paper 001, Alg. 2) and random anycast."""
