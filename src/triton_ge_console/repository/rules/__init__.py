"""What Triton and the GE backends check when they load a model, in their wording."""
