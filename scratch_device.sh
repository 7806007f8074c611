export PYTHONUNBUFFERED=1 PYTHONFAULTHANDLER=1 PYTHONPATH=$PWD/src
S="compute-sanitizer --show-backtrace no --print-limit 100000"
timeout 300 $S python3 scratch_sanitize.py 512 16 32 64 128 256 400 512 1000 > $OUT/san1.log 2>&1 &
timeout 300 $S python3 scratch_sanitize.py 512 1024 2048 2304 3840 4096 > $OUT/san2.log 2>&1 &
timeout 300 $S python3 scratch_sanitize.py 512 1009 2039 3001 4093 > $OUT/san3.log 2>&1 &
timeout 300 $S python3 scratch_sanitize.py 4096 2048 4096 1024 128 > $OUT/san4.log 2>&1 &
wait
for f in $OUT/san*.log; do echo "== $f"; python3 scratch_summary.py $f; tail -2 $f; done
