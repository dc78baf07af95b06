"""The SageMaker training-container contract, reproduced under a local run directory instead of ``/opt/ml``.

A SageMaker training container finds its inputs and tells its outputs apart through fixed paths and ``SM_*``
environment variables. The v3 SDK's own container driver (``sagemaker/train/container_drivers/scripts/
environment.py``) sets them; ``tests/test_contract.py`` holds :func:`container_env` against that file so the two
cannot drift apart.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LOG_LEVEL = 20
MASTER_ADDR = "algo-1"
MASTER_PORT = 7777


def serialize(value: Any) -> str:
    """The driver's ``safe_serialize``: strings stay as they are, everything else becomes JSON."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value)
    except TypeError:
        return str(value)


def deserialize(value: Any) -> Any:
    """The driver's ``safe_deserialize``: JSON where it parses, the string itself where it does not."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value


def hyperparameter_args(hyperparameters: dict[str, Any]) -> list[str]:
    """``--key value`` pairs exactly as the container driver builds them from hyperparameters.json."""
    args: list[str] = []
    for key, value in hyperparameters.items():
        args += [f"--{key}", serialize(deserialize(value))]
    return args


@dataclass
class Layout:
    """``/opt/ml`` for one host of a local job: ``root`` stands where the container has ``/opt/ml``."""

    root: Path

    input = property(lambda self: self.root / "input")
    config = property(lambda self: self.root / "input" / "config")
    data = property(lambda self: self.root / "input" / "data")
    code = property(lambda self: self.root / "input" / "data" / "code")
    model = property(lambda self: self.root / "model")
    output = property(lambda self: self.root / "output")
    output_data = property(lambda self: self.root / "output" / "data")
    failure = property(lambda self: self.root / "output" / "failure")
    checkpoints = property(lambda self: self.root / "checkpoints")

    def make(self) -> Layout:
        for d in (self.config, self.data, self.model, self.output_data, self.checkpoints):
            d.mkdir(parents=True, exist_ok=True)
        return self


@dataclass
class HostConfig:
    """What SageMaker writes to ``/opt/ml/input/config`` for one host."""

    job_name: str
    host: str
    hosts: list[str]
    instance_type: str
    channels: dict[str, str] = field(default_factory=dict)  # channel name -> input mode ("File", "FastFile", ...)
    hyperparameters: dict[str, Any] = field(default_factory=dict)
    network_interface: str = "lo"

    def resource_config(self) -> dict:
        return {
            "current_host": self.host,
            "current_instance_type": self.instance_type,
            "current_group_name": "homogeneousCluster",
            "hosts": sorted(self.hosts),
            "instance_groups": [
                {
                    "instance_group_name": "homogeneousCluster",
                    "instance_type": self.instance_type,
                    "hosts": sorted(self.hosts),
                }
            ],
            "network_interface_name": self.network_interface,
        }

    def input_data_config(self) -> dict:
        return {
            name: {"TrainingInputMode": mode, "S3DistributionType": "FullyReplicated", "RecordWrapperType": "None"}
            for name, mode in self.channels.items()
        }

    def hyperparameters_json(self) -> dict[str, str]:
        """The service stores hyperparameters as strings; the driver decodes them again."""
        return {k: serialize(v) for k, v in self.hyperparameters.items()}

    def write(self, layout: Layout) -> None:
        for name, content in (
            ("resourceconfig.json", self.resource_config()),
            ("inputdataconfig.json", self.input_data_config()),
            ("hyperparameters.json", self.hyperparameters_json()),
        ):
            (layout.config / name).write_text(json.dumps(content, indent=1), encoding="utf-8")


def container_env(
    layout: Layout,
    cfg: HostConfig,
    num_gpus: int,
    num_cpus: int,
    entry_script: str | None = None,
    distributed: dict | None = None,
    master_addr: str = MASTER_ADDR,
    master_port: int = MASTER_PORT,
) -> dict[str, str]:
    """The ``SM_*`` variables the v3 container driver exports, with paths under ``layout.root``."""
    channels = list(cfg.channels)
    hps = {k: deserialize(v) for k, v in cfg.hyperparameters_json().items()}
    hosts = sorted(cfg.hosts)
    env: dict[str, Any] = {
        "SM_MODEL_DIR": str(layout.model),
        "SM_INPUT_DIR": str(layout.input),
        "SM_INPUT_DATA_DIR": str(layout.data),
        "SM_INPUT_CONFIG_DIR": str(layout.config),
        "SM_OUTPUT_DIR": str(layout.output),
        "SM_OUTPUT_FAILURE": str(layout.failure),
        "SM_OUTPUT_DATA_DIR": str(layout.output_data),
        "SM_LOG_LEVEL": LOG_LEVEL,
        "SM_MASTER_ADDR": master_addr,
        "SM_MASTER_PORT": master_port,
    }
    if entry_script:
        env["SM_SOURCE_DIR"] = str(layout.code)
        env["SM_ENTRY_SCRIPT"] = entry_script
    if distributed:
        env["SM_DISTRIBUTED_DRIVER_DIR"] = str(layout.data / "sm_drivers" / "distributed_drivers")
        env["SM_DISTRIBUTED_CONFIG"] = distributed
    for channel in channels:
        env[f"SM_CHANNEL_{channel.upper()}"] = str(layout.data / channel)
    env["SM_CHANNELS"] = channels
    for key, value in hps.items():
        env[f"SM_HP_{key.replace('-', '_').upper()}"] = value
    env["SM_HPS"] = hps
    env.update(
        SM_CURRENT_HOST=cfg.host,
        SM_CURRENT_INSTANCE_TYPE=cfg.instance_type,
        SM_HOSTS=hosts,
        SM_NETWORK_INTERFACE_NAME=cfg.network_interface,
        SM_HOST_COUNT=len(hosts),
        SM_CURRENT_HOST_RANK=hosts.index(cfg.host),
        SM_NUM_CPUS=num_cpus,
        SM_NUM_GPUS=num_gpus,
        SM_NUM_NEURONS=0,
        SM_RESOURCE_CONFIG=cfg.resource_config(),
        SM_INPUT_DATA_CONFIG=cfg.input_data_config(),
    )
    channel_dirs = {c: env[f"SM_CHANNEL_{c.upper()}"] for c in channels}
    env["SM_TRAINING_ENV"] = _training_env(layout, cfg, num_gpus, num_cpus, channel_dirs, hps, master_addr, master_port)
    env["TRAINING_JOB_NAME"] = cfg.job_name
    return {k: serialize(v) for k, v in env.items()}


def _training_env(
    layout: Layout,
    cfg: HostConfig,
    num_gpus: int,
    num_cpus: int,
    channel_dirs: dict[str, str],
    hps: dict,
    master_addr: str,
    master_port: int,
) -> dict[str, Any]:
    """``SM_TRAINING_ENV``: the driver's whole view of the job as one JSON object."""
    return {
        "channel_input_dirs": channel_dirs,
        "current_host": cfg.host,
        "current_instance_type": cfg.instance_type,
        "hosts": sorted(cfg.hosts),
        "master_addr": master_addr,
        "master_port": master_port,
        "hyperparameters": hps,
        "input_data_config": cfg.input_data_config(),
        "input_config_dir": str(layout.config),
        "input_data_dir": str(layout.data),
        "input_dir": str(layout.input),
        "job_name": cfg.job_name,
        "log_level": LOG_LEVEL,
        "model_dir": str(layout.model),
        "network_interface_name": cfg.network_interface,
        "num_cpus": num_cpus,
        "num_gpus": num_gpus,
        "num_neurons": 0,
        "output_data_dir": str(layout.output_data),
        "resource_config": cfg.resource_config(),
    }


def sdk_driver_dir() -> Path:
    """Where the installed SageMaker SDK keeps the scripts it runs inside the container."""
    import sagemaker.train

    return Path(os.path.dirname(sagemaker.train.__file__)) / "container_drivers"
