# rmqd as a container image: `rmqd serve` (name server + broker) as a non-root user, the store
# in a volume.  Nothing is downloaded while the image builds: the wheels (rmqd's own and its
# dependencies') are made on the host first, so the same build works on a machine whose engine
# reaches no registry.  rmqd's wheel is compiled on the host (setup.py: a cp311 linux_x86_64
# wheel from Python 3.11), so the base must run the same Python 3.x on a glibc no older than the
# host's; the image compiles nothing.
#
#   scripts/dev image                                        # both steps below, tagged rmqd:latest
#
#   python3 -m pip wheel --wheel-dir build/wheels . pip     # rmqd, its dependencies, pip itself
#   docker build -t rmqd .                                   # or: --build-arg BASE=<a Debian-based image with that Python>
#   docker run --rm --network host rmqd serve --host 127.0.0.1
#
# scripts/containers.sh does both steps (and builds a Debian base image locally when no registry
# can be reached); docs/containers.md has the details.
ARG BASE=python:3.11-slim

FROM ${BASE} AS build
COPY build/wheels/ /tmp/wheels/
# pip runs from its own wheel, so the venv needs no ensurepip (Debian's python3 lacks it) and the
# final image carries no pip.
RUN python3 -m venv --without-pip /opt/rmqd \
 && /opt/rmqd/bin/python3 "$(ls /tmp/wheels/pip-*.whl | head -n 1)/pip" install --quiet --no-index \
        --no-cache-dir --disable-pip-version-check --no-warn-script-location --find-links /tmp/wheels rmqd \
 && /opt/rmqd/bin/python3 -c "import rmqd.broker.cli; from rmqd._compiled import compiled_status; print(compiled_status())"

FROM ${BASE}
COPY --from=build /opt/rmqd /opt/rmqd
COPY docker/entrypoint.sh /usr/local/bin/rmqd-entrypoint
# /etc/rmqd: broker.conf and, as rocketmqHome, conf/plain_acl.yml (rmqd's: ACL updates rewrite it)
RUN useradd --system --user-group --uid 10001 --home-dir /var/lib/rmqd --no-create-home --shell /usr/sbin/nologin rmqd \
 && mkdir -p /var/lib/rmqd /etc/rmqd/conf \
 && chown rmqd:rmqd /var/lib/rmqd /etc/rmqd /etc/rmqd/conf
ENV PATH=/opt/rmqd/bin:$PATH \
    HOME=/var/lib/rmqd \
    PYTHONUNBUFFERED=1 \
    RMQD_STORE=/var/lib/rmqd/store \
    RMQD_BROKER_CONF=/etc/rmqd/broker.conf \
    RMQD_NAMESRV_PORT=9876 \
    RMQD_BROKER_PORT=10911
USER rmqd
WORKDIR /var/lib/rmqd
# the store (commit log, queues, config/*.json) and the name server's kvConfig.json ($HOME/namesrv)
VOLUME /var/lib/rmqd
# name server, broker fast (VIP) port = listenPort-2, broker listenPort, HA port = listenPort+1,
# RocketMQ 5's gRPC clients (the proxy's port)
EXPOSE 9876 10909 10911 10912 8081
# Both listeners accept a TCP connection.  One command on purpose: it can later be pointed at an
# HTTP health endpoint without touching anything else.
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
    CMD ["python3", "-c", "import os, socket\nfor k in ('RMQD_NAMESRV_PORT', 'RMQD_BROKER_PORT'):\n    socket.create_connection(('127.0.0.1', int(os.environ[k])), 2).close()"]
# `rmqd serve` exits 0 on SIGTERM after draining requests and flushing the store.
STOPSIGNAL SIGTERM
ENTRYPOINT ["rmqd-entrypoint"]
CMD ["serve"]
