"""How a backend's servers are obtained: native processes, docker compose, or external URLs."""
