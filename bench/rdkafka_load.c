/* A load generator in C on librdkafka, so that the client is not the limit of a broker benchmark
 * (bench/goals.py builds it with `cc -O2 ... -lrdkafka` and runs it against each broker).
 *
 *   rdkafka_load produce BOOTSTRAP TOPIC PARTITIONS RECORDS SIZE [key=value ...]
 *   rdkafka_load consume BOOTSTRAP TOPIC PARTITIONS RECORDS [key=value ...]
 *
 * produce: RECORDS values of SIZE random bytes (incompressible, no key), round robin over the
 * partitions, the payload not copied by librdkafka; times from the first produce() to the last
 * delivery report. consume: assigns every partition from offset 0 (no group join) and counts records
 * until RECORDS arrived; times from the first record to the last. Extra key=value pairs go to the
 * librdkafka configuration (acks, enable.idempotence, linger.ms, ...), except load.keys=N (produce):
 * record i gets the key "key-<i % N>", for compacted topics, which refuse records without a key
 * (bytes= still counts values only). Prints one line:
 *   records=N bytes=B seconds=S
 * and exits non-zero on any delivery error or when RECORDS do not arrive within 120 s.
 */
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>

static long delivered, failed;
static double last_delivery;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void die(const char *what, const char *why) {
    fprintf(stderr, "rdkafka_load: %s: %s\n", what, why);
    exit(2);
}

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
    (void)rk; (void)opaque;
    if (m->err) {
        if (failed++ == 0) fprintf(stderr, "rdkafka_load: delivery failed: %s\n", rd_kafka_err2str(m->err));
    } else {
        delivered++;
    }
    last_delivery = now();
}

static long keys; /* load.keys=N: 0 for records without a key */

static rd_kafka_conf_t *configure(const char *bootstrap, int argc, char **argv) {
    char err[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    if (rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap, err, sizeof err) != RD_KAFKA_CONF_OK)
        die("bootstrap.servers", err);
    for (int i = 0; i < argc; i++) {
        char *eq = strchr(argv[i], '=');
        if (!eq) die(argv[i], "expected key=value");
        *eq = '\0';
        if (strcmp(argv[i], "load.keys") == 0) {
            keys = atol(eq + 1);
            if (keys < 1) die("load.keys", "expected a positive count");
            continue;
        }
        if (rd_kafka_conf_set(conf, argv[i], eq + 1, err, sizeof err) != RD_KAFKA_CONF_OK) die(argv[i], err);
    }
    return conf;
}

static int produce(const char *bootstrap, const char *topic, int partitions, long records, long size,
                   int argc, char **argv) {
    char err[512];
    rd_kafka_conf_t *conf = configure(bootstrap, argc, argv);
    rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!rk) die("rd_kafka_new", err);
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
    /* Values are slices of one random buffer, each at another offset, so no two are alike. */
    long pool = size + 65536;
    char *payload = malloc(pool);
    FILE *urandom = fopen("/dev/urandom", "rb");
    if (!payload || !urandom || fread(payload, 1, pool, urandom) != (size_t)pool) die("payload", "no random bytes");
    fclose(urandom);
    double start = now();
    for (long i = 0; i < records; i++) {
        char *value = payload + (i * 4099) % 65536;
        char key[32];
        int key_len = keys ? snprintf(key, sizeof key, "key-%ld", i % keys) : 0;
        while (rd_kafka_produce(rkt, (int32_t)(i % partitions), 0, value, size,
                                keys ? key : NULL, (size_t)key_len, NULL) == -1) {
            rd_kafka_resp_err_t e = rd_kafka_last_error();
            if (e != RD_KAFKA_RESP_ERR__QUEUE_FULL) die("produce", rd_kafka_err2str(e));
            rd_kafka_poll(rk, 1);
        }
        if ((i & 1023) == 0) rd_kafka_poll(rk, 0);
    }
    double deadline = now() + 120;
    while (delivered + failed < records && now() < deadline) rd_kafka_poll(rk, 50);
    double seconds = last_delivery - start;
    rd_kafka_topic_destroy(rkt);
    rd_kafka_destroy(rk);
    free(payload);
    if (failed || delivered < records) {
        fprintf(stderr, "rdkafka_load: %ld of %ld delivered, %ld failed\n", delivered, records, failed);
        return 1;
    }
    printf("records=%ld bytes=%ld seconds=%.6f\n", delivered, delivered * size, seconds);
    return 0;
}

static int consume(const char *bootstrap, const char *topic, int partitions, long records, int argc, char **argv) {
    char err[512];
    rd_kafka_conf_t *conf = configure(bootstrap, argc, argv);
    if (rd_kafka_conf_set(conf, "group.id", "rdkafka-load", err, sizeof err) != RD_KAFKA_CONF_OK) die("group.id", err);
    if (rd_kafka_conf_set(conf, "enable.auto.commit", "false", err, sizeof err) != RD_KAFKA_CONF_OK)
        die("enable.auto.commit", err);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    if (!rk) die("rd_kafka_new", err);
    rd_kafka_poll_set_consumer(rk);
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(partitions);
    for (int p = 0; p < partitions; p++)
        rd_kafka_topic_partition_list_add(list, topic, p)->offset = RD_KAFKA_OFFSET_BEGINNING;
    rd_kafka_resp_err_t e = rd_kafka_assign(rk, list);
    if (e) die("assign", rd_kafka_err2str(e));
    rd_kafka_topic_partition_list_destroy(list);
    /* Batches off the consumer queue, as confluent-kafka's consume() takes them: one call per
     * thousands of records instead of one per record. */
    rd_kafka_queue_t *queue = rd_kafka_queue_get_consumer(rk);
    enum { BATCH = 10000 };
    static rd_kafka_message_t *batch[BATCH];
    long got = 0, bytes = 0;
    double start = 0, last = 0, deadline = now() + 120;
    while (got < records && now() < deadline) {
        ssize_t n = rd_kafka_consume_batch_queue(queue, 100, batch, BATCH);
        if (n < 0) die("consume", rd_kafka_err2str(rd_kafka_last_error()));
        for (ssize_t i = 0; i < n; i++) {
            rd_kafka_message_t *m = batch[i];
            if (m->err) {
                if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) die("consume", rd_kafka_message_errstr(m));
            } else {
                if (got++ == 0) start = now();
                bytes += (long)m->len;
            }
            rd_kafka_message_destroy(m);
        }
        if (n > 0) last = now();
    }
    rd_kafka_queue_destroy(queue);
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    if (got < records) {
        fprintf(stderr, "rdkafka_load: %ld of %ld records arrived\n", got, records);
        return 1;
    }
    printf("records=%ld bytes=%ld seconds=%.6f\n", got, bytes, last - start);
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 7 && strcmp(argv[1], "produce") == 0)
        return produce(argv[2], argv[3], atoi(argv[4]), atol(argv[5]), atol(argv[6]), argc - 7, argv + 7);
    if (argc >= 6 && strcmp(argv[1], "consume") == 0)
        return consume(argv[2], argv[3], atoi(argv[4]), atol(argv[5]), argc - 6, argv + 6);
    fprintf(stderr, "usage: rdkafka_load produce BOOTSTRAP TOPIC PARTITIONS RECORDS SIZE [key=value ...]\n"
                    "       rdkafka_load consume BOOTSTRAP TOPIC PARTITIONS RECORDS [key=value ...]\n");
    return 2;
}
