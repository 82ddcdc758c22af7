"""Triton GE Console: build, launch, watch and control Triton Inference Server with CANN GE backends."""

__version__ = "0.1.0"
