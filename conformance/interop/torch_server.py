# A PyTorch 1.13 TCPStore server (torch.distributed.TCPStore, is_master=True) on 127.0.0.1, port
# chosen by the OS: prints the port alone on its first line, then serves until its standard input
# closes or it is killed. Exits 77 when torch cannot be imported.
import datetime
import sys

try:
    import torch.distributed as dist
except Exception as e:  # noqa: BLE001
    print(f"SKIP: /usr/bin/python3 cannot import torch.distributed ({e}); install python3-torch", file=sys.stderr)
    sys.exit(77)

store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=datetime.timedelta(seconds=60))
print(store.port, flush=True)
sys.stdin.read()
