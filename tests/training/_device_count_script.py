"""Saves or restores a checkpoint under a given number of host devices; used
by test_checkpoint_devices.py (the device count is fixed when jax starts).

usage: python _device_count_script.py DEVICES save|restore DIRECTORY
"""

import os
import sys


devices, mode, directory = int(sys.argv[1]), sys.argv[2], sys.argv[3]
os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices}"

import equinox as eqx  # noqa: E402
import jax  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

from sciml.training import Checkpointer, Extra  # noqa: E402


assert jax.device_count() == devices
model = eqx.nn.Linear(3, 2, key=jax.random.key(0))
optimizer = optax.adam(1e-3)
opt_state = optimizer.init(eqx.filter(model, eqx.is_array))
checkpointer = Checkpointer(directory)
if mode == "save":
    # the model replicated over every device, as a data-parallel trainer holds it
    mesh = jax.sharding.Mesh(np.array(jax.devices()), ("data",))
    replicated = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
    model = eqx.filter_shard(model, replicated)
    model = eqx.tree_at(lambda m: m.weight, model, model.weight + 1.0)
    extra = Extra({"ids": np.arange(5, dtype=np.int64)}, {"note": "saved"})
    checkpointer.save(7, model, opt_state, jax.random.key(3), extra=extra)
else:
    restored, _, key, step = checkpointer.restore(model, opt_state)
    extra = checkpointer.restore_extra()
    alone = checkpointer.restore_model(eqx.filter_eval_shape(lambda: model))
    expected = np.asarray(model.weight) + 1.0
    assert step == 7
    np.testing.assert_array_equal(np.asarray(restored.weight), expected)
    np.testing.assert_array_equal(np.asarray(alone.weight), expected)
    np.testing.assert_array_equal(jax.random.key_data(key), jax.random.key_data(jax.random.key(3)))
    np.testing.assert_array_equal(extra.arrays["ids"], np.arange(5))
    assert extra.data == {"note": "saved"}
checkpointer.close()
print("ok", mode, devices)
