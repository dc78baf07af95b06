"""SageMaker on a real account: the account and its discovery, the offline stand-in, preflight, building and
launching jobs, following them, and CloudWatch metrics. Nothing here is imported by ``helpers.local``."""
