"""SageMaker on a real account: the account and its discovery, preflight, building and launching jobs, following
them, and CloudWatch metrics. The offline account a dry run talks to is :mod:`sagemaker_standin.offline_account`.
Nothing here is imported by ``helpers.local``."""
