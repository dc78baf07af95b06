"""Test stand-in for SageMaker's data-parallel library (see torch_smddp.py)."""
