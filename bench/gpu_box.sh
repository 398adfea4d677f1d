#!/usr/bin/env bash
# The checks that need a GPU, in one go, on a GPU box with this checkout (a lent
# machine through the workplace's device tool, or a rented box): the driver's own
# view, the NVML probe under a CUDA load (bench/gpu_check.py), and the tests that
# skip without a driver: the real NVML probe, the gpu_idle rule on its figures, a
# checkpoint of CUDA tensors verified without a GPU and reloaded on both, and the
# engine stopping a run idle on its GPU (tests/test_gpu_box.py).
#
#   bash bench/gpu_box.sh [OUTDIR]
#
# Missing Python packages may be given as wheels in .whl/ (no registry needed).
# Each part's output goes to OUTDIR (default ./gpu-box-out) as well as the terminal.
set -u
out=${1:-gpu-box-out}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
if compgen -G ".whl/*.whl" > /dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
        --upgrade --target /tmp/itera-site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/itera-site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
status=0
part() {  # part NAME COMMAND...: run it, keep its output, remember a failure
    local name=$1; shift
    echo "=== $name: $*"
    "$@" 2>&1 | tee "$out/$name.log"
    local rc=${PIPESTATUS[0]}
    echo "=== $name: exit $rc"
    [ "$rc" = 0 ] || status=1
}
part smi nvidia-smi --query-gpu=name,uuid,driver_version,memory.total,utilization.gpu \
    --format=csv
part versions python3 -c "import sys, torch, pynvml; print(sys.version.split()[0], \
'torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.is_available(), \
'nvml', pynvml.nvmlInitWithFlags(0) or pynvml.nvmlSystemGetDriverVersion())"
part gpu_check python3 bench/gpu_check.py --seconds 8
part tests python3 -m pytest -q -p no:cacheprovider -n 4 \
    tests/test_probes_gpu.py tests/test_stop_gpu_idle.py tests/test_gpu_box.py
exit $status
