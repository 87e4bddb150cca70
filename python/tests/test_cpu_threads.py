"""python/tests/test_cpu_threads.py — tapewise.cpu(threads=N): the count is checked and reported, the
environment variable sets the default, and results never depend on the count."""
import numpy as np
import pytest

import tapewise

# More than two chunks of the pool (2^15 elements each), and not a multiple of the program's lanes.
N = 3 * 2**15 + 7


def test_the_count_is_reported_and_checked():
    assert tapewise.cpu(threads=3).threads == 3
    assert tapewise.cpu(threads=1).threads == 1
    assert tapewise.cpu().threads >= 1
    assert "3 threads" in tapewise.cpu(threads=3).describe()
    with pytest.raises(TypeError, match="threads must be an int or None, not bool"):
        tapewise.cpu(threads=True)
    with pytest.raises(TypeError, match="threads must be an int or None, not float"):
        tapewise.cpu(threads=2.0)
    for bad in (-1, 257, 10**30):
        with pytest.raises(tapewise.InvalidArgumentError, match=f"threads {bad} is outside 0..256"):
            tapewise.cpu(threads=bad)


def _run(threads, x):
    tape = tapewise.Tape(tapewise.cpu(threads=threads))
    a = tape.leaf(x)
    y = tape.softplus(tape.mul(tape.sin(a), a))
    grads = tape.backward(y, np.ones_like(x))
    return np.asarray(tape.value(y)).tobytes(), np.asarray(grads[a]).tobytes()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_results_do_not_depend_on_the_thread_count(dtype):
    x = np.linspace(-4, 4, N, dtype=dtype)
    assert _run(1, x) == _run(2, x) == _run(5, x)


def test_the_environment_variable_sets_the_default(monkeypatch):
    monkeypatch.setenv("TAPEWISE_CPU_THREADS", "4")
    assert tapewise.cpu().threads == 4
    assert tapewise.cpu(threads=2).threads == 2
    monkeypatch.setenv("TAPEWISE_CPU_THREADS", "many")
    with pytest.raises(tapewise.InvalidArgumentError, match="TAPEWISE_CPU_THREADS='many' is not a whole number"):
        tapewise.cpu()
