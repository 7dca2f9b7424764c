import json, sys, time, threading, urllib.request
port = int(sys.argv[1]); conc = int(sys.argv[2]); n = int(sys.argv[3])
schema = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}}}, "required": ["name", "age", "tags"]}
def one(i):
    body = {"prompt": "Describe a person as JSON: ", "max_tokens": 64, "temperature": 0.8, "seed": 1000 + i, "json_schema": schema}
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    r = json.load(urllib.request.urlopen(req, timeout=600))
    return r["usage"]["completion_tokens"], r["choices"][0]["text"]
texts = {}
tokens = 0
lock = threading.Lock()
def worker(ids):
    global tokens
    for i in ids:
        t, text = one(i)
        with lock:
            tokens += t; texts[i] = text
t0 = time.time()
th = [threading.Thread(target=worker, args=(list(range(k, n, conc)),)) for k in range(conc)]
[x.start() for x in th]; [x.join() for x in th]
dt = time.time() - t0
print(json.dumps({"conc": conc, "tokens": tokens, "seconds": round(dt, 2), "tok_s": round(tokens / dt, 1), "texts": texts}))
