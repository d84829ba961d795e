# The tunefuse tuning daemon. NVRTC comes from PyPI; the driver from the host through the
# NVIDIA container runtime:  docker run --gpus all -v tunefuse-cache:/cache tunefuse
FROM python:3.12-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    TUNEFUSE_CACHE_URL=sqlite:////cache/cache.sqlite \
    TUNEFUSE_STUDIES=/cache \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility

RUN useradd --create-home --uid 10001 tunefuse && mkdir -p /cache && chown tunefuse /cache
WORKDIR /app
COPY pyproject.toml README.md ./
COPY tunefuse ./tunefuse
COPY cache_db ./cache_db
COPY cli ./cli
RUN pip install . && rm -rf /root/.cache

USER tunefuse
VOLUME ["/cache"]
# The daemon handles SIGTERM itself (releases its job, exits 0); no shell in between.
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=60s --timeout=20s --start-period=30s --retries=3 \
  CMD ["tunefuse", "doctor", "--quick"]
ENTRYPOINT ["tunefuse", "daemon"]
