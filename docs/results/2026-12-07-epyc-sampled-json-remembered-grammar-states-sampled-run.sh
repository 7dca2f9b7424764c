#!/bin/bash
# usage: sampled-run.sh BIN LIBDIR NP CONC N SPEC
BIN=$1; LIB=$2; NP=$3; C=$4; N=$5; SPEC=${6:-none}
LD_LIBRARY_PATH=$LIB $BIN serve -m /tmp/sbfix/qwen3-0.6b-q4_k_m-exact.gguf --spec $SPEC -np $NP -c 512 -t 2 --host 127.0.0.1 --port 0 2> /tmp/srv.log &
PID=$!
for i in $(seq 100); do PORT=$(grep -o "listening on http://127.0.0.1:[0-9]*" /tmp/srv.log | grep -o "[0-9]*$"); [ -n "$PORT" ] && break; sleep 0.3; done
python3 /tmp/sampled-json.py $PORT 1 2 > /dev/null   # warm-up
python3 /tmp/sampled-json.py $PORT $C $N
kill $PID; wait $PID 2>/dev/null
