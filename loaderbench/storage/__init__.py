"""Data that is far away: the dataset served over HTTP with a real network path, and streamed tar shards.

For a cell with `storage = "http"` the suite starts nginx on the dataset's folder (or uses the cell's
`storage_url`), builds the path the study asks for (latency, jitter, a bandwidth cap) and stops all of it when
the cell ends. Modules, one job each:

``tools``    the programs needed (nginx, ip, tc), what the machine can shape with, the plan for a cell
``netns``    the private network namespaces of a cell and its server, the veth pair, the tbf/netem qdiscs
``nginx``    the server's configuration, start and readiness
``proxy``    the delaying TCP proxy (latency where there is no netem; bandwidth where there is no tbf)
``server``   the server supervisor process and the cell's handle on it (start, fault, stop)
``session``  `serve_for_cell`: what a cell process wraps its measuring in
``client``   the workers' HTTP client (pooled or a connection per request) and its counters
``shards``   WebDataset-layout tar shards: writing, the shard cache, reading with truncation checks
``passes``   the observer that checks every pass over the shards saw each sample exactly once
``rules``    which storage settings a study's cells may combine

Importing this package imports no torch.
"""
