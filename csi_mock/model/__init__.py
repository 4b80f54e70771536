"""The storage model: pools, volume kinds, placement and capacity arithmetic.

Plain Python with no gRPC and no I/O, so every rule here is testable on its own.
"""
