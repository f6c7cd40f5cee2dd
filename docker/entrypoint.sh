#!/bin/sh
# The rmqd image's entrypoint.  `docker run IMAGE` (or `docker run IMAGE serve [ARGS]`, or just
# `docker run IMAGE --broker-port 10921`) runs `rmqd serve` on the image's store volume and ports,
# with /etc/rmqd/broker.conf when one is mounted there; ARGS come last, so they override.  Any
# other first word is an rmqd command (`docker run IMAGE store verify /var/lib/rmqd/store`).
# exec: rmqd is PID 1 and gets SIGTERM from `docker stop` itself.
set -eu
if [ "$#" -eq 0 ] || [ "$1" = serve ] || [ "${1#-}" != "$1" ]; then
    [ "$#" -gt 0 ] && [ "$1" = serve ] && shift
    if [ -n "${RMQD_BROKER_CONF:-}" ] && [ -f "$RMQD_BROKER_CONF" ]; then
        set -- -c "$RMQD_BROKER_CONF" "$@"
    fi
    # RMQD_GRPC_PORT only when set: unset, rmqd's own default (8081) applies with its rule that a
    # taken default port is a warning, and a broker.conf's grpcServerPort is not overridden.
    if [ -n "${RMQD_GRPC_PORT:-}" ]; then
        set -- --grpc-port "$RMQD_GRPC_PORT" "$@"
    fi
    exec rmqd serve --store "$RMQD_STORE" --namesrv-port "$RMQD_NAMESRV_PORT" \
        --broker-port "$RMQD_BROKER_PORT" "$@"
fi
exec rmqd "$@"
