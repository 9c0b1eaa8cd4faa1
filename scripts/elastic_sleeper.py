"""A worker for scripts/pytorch_elastic_matrix.py: does nothing but live until a wall-clock
deadline (argv[1], Unix seconds), so a restarted group ends when the job does and the agents'
rendezvous is all there is to see. No torch import: eight agents' workers cost no CPU."""
import sys
import time

deadline = float(sys.argv[1])
while time.time() < deadline:
    time.sleep(min(0.2, max(0.0, deadline - time.time())))
