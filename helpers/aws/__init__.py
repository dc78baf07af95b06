"""SageMaker on a real account: the account and its discovery, preflight, building and launching jobs, following
them, and CloudWatch metrics. The offline account a dry run talks to is :mod:`helpers.standin.offline`. Nothing here
is imported by ``helpers.local``."""
