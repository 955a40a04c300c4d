"""In-context linear regression: data (nested task sets), Bayes baselines (dMMSE, ridge), Hoogland et al.'s
model, and the task the training loop runs (``TrainConfig(task="icl_regression", ...)``)."""
from plateau_lib.icl.baselines import bayes_predict, delta, dmmse_predict, ridge_predict
from plateau_lib.icl.data import ood_batch, sample, task_set, to_tokens
from plateau_lib.icl.model import ICLConfig, ICLTransformer
from plateau_lib.icl.task import ICLRegression

__all__ = ["ICLConfig", "ICLRegression", "ICLTransformer", "bayes_predict", "delta", "dmmse_predict", "ood_batch",
           "ridge_predict", "sample", "task_set", "to_tokens"]
