"""Numbers before launching: the instance catalogue, cost, scaling, memory and spot planners."""
