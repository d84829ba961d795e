#!/usr/bin/env bash
# nvFuser's Python frontend tests through the shim (GPU, torch). The test files are NVIDIA's
# and are not in this repository: put them under benchmarks/nvfuser_tests/tests/ (git-ignored)
# as README.md says, then on the device machine:
#   bash .devicekit/run.sh bash benchmarks/nvfuser_tests/run.sh   (carry .devicekit and the tests)
# JUnit XML per file under $OUT; summarize.py lists every test that did not pass.
cd "$(dirname "$0")"
export PYTHONPATH=$PWD/shim:$PWD:$PYTHONPATH
cp direct_conftest.py tests/direct/conftest.py
for f in direct/test_python_frontend direct/test_repro direct/test_high_complexity legacy/test_python_frontend; do
  name=$(echo $f | tr / _)
  timeout ${PER_FILE:-280} python3 -m pytest -c pytest.ini --rootdir . tests/$f.py -q --tb=line \
    --junitxml=$OUT/$name.xml > $OUT/$name.log 2>&1
  echo "$f rc=$?"; tail -1 $OUT/$name.log
done
python3 summarize.py $OUT/*.xml | tail -1
