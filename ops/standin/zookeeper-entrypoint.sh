#!/bin/bash
# Entry point of the stand-in ZooKeeper image (ops/cluster.py builds it from Debian's zookeeper
# package when no registry answers). It takes the settings docker-compose.yml gives the official
# image (ZOO_SERVERS, ZOO_ADMINSERVER_ENABLED, ZOO_4LW_COMMANDS_WHITELIST, ZOO_CFG_EXTRA) and keeps
# its data in the same places (/data, /datalog).
set -e
config=/conf/zoo.cfg
mkdir -p /conf /data /datalog /logs
if [[ ! -f $config ]]; then
    {
        echo "dataDir=/data"
        echo "dataLogDir=/datalog"
        echo "tickTime=2000"
        echo "initLimit=5"
        echo "syncLimit=2"
        echo "standaloneEnabled=true"
        echo "admin.enableServer=${ZOO_ADMINSERVER_ENABLED:-true}"
        for server in ${ZOO_SERVERS:-server.1=localhost:2888:3888;2181}; do echo "$server"; done
        if [[ -n $ZOO_4LW_COMMANDS_WHITELIST ]]; then echo "4lw.commands.whitelist=$ZOO_4LW_COMMANDS_WHITELIST"; fi
        for extra in $ZOO_CFG_EXTRA; do echo "$extra"; done
    } > "$config"
fi
[[ -f /data/myid ]] || echo 1 > /data/myid
exec java -Xmx256m -Dzookeeper.jmx.log4j.disable=true \
    -cp /usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar \
    org.apache.zookeeper.server.quorum.QuorumPeerMain "$config"
