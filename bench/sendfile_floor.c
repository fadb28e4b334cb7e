/* The kernel's floor under a broker's consume CPU (issue 33): what serving page-cached file bytes
 * over a loopback TCP connection costs the sending process, with no broker around it.
 *
 *   sendfile_floor [--bytes N] [--partitions P] [--fetch N] [--reps R] [--dir PATH]
 *                  [--cc NAME] [--sndbuf N] [--rcvbuf N] [--lowat N] [--chunk N]
 *                  [--mode sendfile|splice|copy] [--cork] [--think-us-per-mb N] [--cc-on-listener]
 *
 * P files of N/P bytes each are written to PATH (so they sit in the page cache). Each repetition a
 * reader thread connects over 127.0.0.1 and asks like a consumer with one Fetch in flight: a 64-byte
 * request, then it recv()s the whole answer into a buffer (a 4-byte size, then the body) before the
 * next request. The sender thread answers each request as a broker's Fetch does: for each partition a
 * 64-byte partition header sent with MSG_MORE and the next --fetch bytes (1 MiB: librdkafka's
 * max.partition.fetch.bytes) of that partition's file with sendfile(2) on a non-blocking socket,
 * poll()ing for room on EAGAIN. An empty answer ends the repetition.
 *
 * Each thread's CPU is getrusage(RUSAGE_THREAD): on loopback the receiving side's TCP processing runs
 * in softirq inside the sender's system call, so the sender's system time is what any page-cache
 * broker pays per byte, before any work of its own. Per repetition one line, then medians (min-max):
 *   rep=I bytes=B seconds=S sender_user=U sender_sys=Y reader_user=U reader_sys=Y   (CPU-s per 10^9 B)
 *   answers=A sender_switches=V+I   (the sender's voluntary + involuntary context switches)
 *
 * Socket settings: --cc (TCP_CONGESTION on the sender's socket after the accept; with --cc-on-listener on
 * the listening socket instead, so the connection is born with it, as Ebb's loopback listeners do: a
 * socket switched from BBR after the accept keeps BBR's pacing); "" keeps the system's), --sndbuf/--rcvbuf
 * (SO_SNDBUF on the sender, SO_RCVBUF on the reader; 0 autotunes), --lowat (TCP_NOTSENT_LOWAT on the
 * sender), --chunk (at most this many bytes per sendfile/splice call; 0: the whole range), --cork
 * (TCP_CORK around each answer instead of MSG_MORE on the headers), --mode splice (file -> pipe ->
 * socket) or copy (pread into a buffer, then send: what a broker without zero copy pays).
 * --think-us-per-mb makes the reader spin that long per 10^6 bytes after each answer, as a client
 * parsing it (librdkafka: 1.1-1.6 ms per six-partition answer of 6 MB, about 200-250 per MB), so the
 * sender meets a full socket as it does under a real consumer.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define HEADER 64
#define MAX_REPS 64

static long long total_bytes = 300000000LL;
static int partitions = 1, reps = 5, sndbuf = 0, rcvbuf = 0, cork = 0, cc_on_listener = 0;
static long fetch_bytes = 1048576, chunk = 0, lowat = -1, think_us_per_mb = 0;
static const char *cc = "reno", *mode = "sendfile", *dir = "/tmp";
static int files[256];
static long long file_size;

static void die(const char *what) { perror(what); exit(1); }

static double cpu_of(struct rusage *r, int sys) {
    struct timeval *t = sys ? &r->ru_stime : &r->ru_utime;
    return t->tv_sec + t->tv_usec / 1e6;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void set_cc(int fd) {
    if (*cc && setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc, strlen(cc)) < 0) die("TCP_CONGESTION");
}

static int wait_room(int fd) {
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    return poll(&p, 1, -1);
}

/* Write all of buf (non-blocking socket): poll for room on EAGAIN, as a broker's event loop does. */
static void send_all(int fd, const char *buf, size_t len, int flags) {
    while (len) {
        ssize_t n = send(fd, buf, len, flags);
        if (n < 0) {
            if (errno == EAGAIN) { wait_room(fd); continue; }
            die("send");
        }
        buf += n;
        len -= n;
    }
}

static char *copy_buffer;
static int pipe_fds[2];

static void send_file(int out, int in, off_t off, long len) {
    while (len > 0) {
        long want = chunk && chunk < len ? chunk : len;
        ssize_t n;
        if (strcmp(mode, "sendfile") == 0) {
            n = sendfile(out, in, &off, want);
        } else if (strcmp(mode, "splice") == 0) {
            loff_t from = off;
            ssize_t in_pipe = splice(in, &from, pipe_fds[1], NULL, want, SPLICE_F_MOVE);
            if (in_pipe <= 0) die("splice in");
            ssize_t left = in_pipe;
            while (left > 0) {
                n = splice(pipe_fds[0], NULL, out, NULL, left, SPLICE_F_MOVE | (len > left ? SPLICE_F_MORE : 0));
                if (n < 0 && errno == EAGAIN) { wait_room(out); continue; }
                if (n <= 0) die("splice out");
                left -= n;
            }
            off += in_pipe;
            len -= in_pipe;
            continue;
        } else {
            n = pread(in, copy_buffer, want, off);
            if (n <= 0) die("pread");
            send_all(out, copy_buffer, n, len > n ? MSG_MORE : 0);
            off += n;
            len -= n;
            continue;
        }
        if (n < 0) {
            if (errno == EAGAIN) { wait_room(out); continue; }
            die("sendfile");
        }
        if (n == 0) { fprintf(stderr, "file ended early\n"); exit(1); }
        len -= n;
    }
}

struct result { double seconds, su, ss, ru, rs; long long bytes, answers, vcsw, ivcsw; };
static int listener, port;

static void *reader(void *arg) {
    struct result *res = arg;
    struct rusage before, after;
    getrusage(RUSAGE_THREAD, &before);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) die("socket");  /* the client keeps the system's congestion control, as librdkafka does */
    if (rcvbuf && setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf) < 0) die("SO_RCVBUF");
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(0x7f000001)};
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) die("connect");
    size_t cap = (size_t)partitions * (fetch_bytes + HEADER) + 16;
    char *buf = malloc(cap), request[HEADER] = {0};
    long long got = 0;
    for (;;) {
        send_all(fd, request, HEADER, 0);
        uint32_t size;
        if (recv(fd, &size, 4, MSG_WAITALL) != 4) die("recv size");
        if (size == 0) break;
        if (size > cap) { fprintf(stderr, "answer too large\n"); exit(1); }
        size_t have = 0;
        while (have < size) {  /* as a client reads: into its buffer, as much as is there */
            ssize_t n = recv(fd, buf + have, size - have, 0);
            if (n <= 0) die("recv");
            have += n;
        }
        got += size;
        if (think_us_per_mb) {  /* a client's parse of the answer before its next request */
            double until = now() + think_us_per_mb * (size / 1e6) / 1e6;
            while (now() < until) {}
        }
    }
    close(fd);
    free(buf);
    getrusage(RUSAGE_THREAD, &after);
    res->ru = cpu_of(&after, 0) - cpu_of(&before, 0);
    res->rs = cpu_of(&after, 1) - cpu_of(&before, 1);
    return NULL;
}

static void serve(struct result *res) {
    int fd = accept(listener, NULL, NULL);
    if (fd < 0) die("accept");
    if (!cc_on_listener) set_cc(fd);
    int one = 1;
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) < 0) die("TCP_NODELAY");
    if (sndbuf && setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf) < 0) die("SO_SNDBUF");
    if (lowat >= 0) {
        int v = (int)lowat;
        if (setsockopt(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &v, sizeof v) < 0) die("TCP_NOTSENT_LOWAT");
    }
    fcntl(fd, F_SETFL, O_NONBLOCK);
    struct rusage before, after;
    getrusage(RUSAGE_THREAD, &before);
    double start = 0;
    long long position = 0, sent = 0;
    char request[HEADER], header[HEADER + 4];
    memset(header, 0, sizeof header);
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        size_t have = 0;
        while (have < HEADER) {
            ssize_t n = recv(fd, request + have, HEADER - have, 0);
            if (n < 0 && errno == EAGAIN) { poll(&p, 1, -1); continue; }
            if (n <= 0) die("recv request");
            have += n;
        }
        if (start == 0) start = now();
        long len = position >= file_size ? 0 : (file_size - position < fetch_bytes ? file_size - position : fetch_bytes);
        uint32_t size = len ? (uint32_t)(partitions * (HEADER + len)) : 0;
        if (cork) setsockopt(fd, IPPROTO_TCP, TCP_CORK, &one, sizeof one);
        memcpy(header, &size, 4);
        if (!len) { send_all(fd, header, 4, 0); break; }
        for (int i = 0; i < partitions; i++) {
            /* the answer's size with the first partition's header, then one header per partition */
            send_all(fd, i == 0 ? header : header + 4, i == 0 ? HEADER + 4 : HEADER, cork ? 0 : MSG_MORE);
            send_file(fd, files[i], position, len);
        }
        if (cork) {
            int zero = 0;
            setsockopt(fd, IPPROTO_TCP, TCP_CORK, &zero, sizeof zero);
        }
        position += len;
        sent += (long long)partitions * len;
        res->answers++;
    }
    getrusage(RUSAGE_THREAD, &after);
    res->seconds = now() - start;
    res->bytes = sent;
    res->su = cpu_of(&after, 0) - cpu_of(&before, 0);
    res->ss = cpu_of(&after, 1) - cpu_of(&before, 1);
    res->vcsw = after.ru_nvcsw - before.ru_nvcsw;
    res->ivcsw = after.ru_nivcsw - before.ru_nivcsw;
    close(fd);
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void summary(const char *name, double *v, int n) {
    double s[MAX_REPS];
    memcpy(s, v, n * sizeof *v);
    qsort(s, n, sizeof *s, by_value);
    double median = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
    printf(" %s=%.3f (%.3f-%.3f)", name, median, s[0], s[n - 1]);
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(o, "--cork") == 0) { cork = 1; continue; }
        if (strcmp(o, "--cc-on-listener") == 0) { cc_on_listener = 1; continue; }
        if (!v) { fprintf(stderr, "%s needs a value\n", o); return 2; }
        i++;
        if (strcmp(o, "--bytes") == 0) total_bytes = atoll(v);
        else if (strcmp(o, "--partitions") == 0) partitions = atoi(v);
        else if (strcmp(o, "--fetch") == 0) fetch_bytes = atol(v);
        else if (strcmp(o, "--reps") == 0) reps = atoi(v);
        else if (strcmp(o, "--dir") == 0) dir = v;
        else if (strcmp(o, "--cc") == 0) cc = v;
        else if (strcmp(o, "--sndbuf") == 0) sndbuf = atoi(v);
        else if (strcmp(o, "--rcvbuf") == 0) rcvbuf = atoi(v);
        else if (strcmp(o, "--lowat") == 0) lowat = atol(v);
        else if (strcmp(o, "--chunk") == 0) chunk = atol(v);
        else if (strcmp(o, "--mode") == 0) mode = v;
        else if (strcmp(o, "--think-us-per-mb") == 0) think_us_per_mb = atol(v);
        else { fprintf(stderr, "unknown option %s\n", o); return 2; }
    }
    if (partitions < 1 || partitions > 256 || reps < 1 || reps > MAX_REPS || fetch_bytes < 1 ||
        (strcmp(mode, "sendfile") && strcmp(mode, "splice") && strcmp(mode, "copy"))) {
        fprintf(stderr, "bad options\n");
        return 2;
    }
    file_size = total_bytes / partitions;
    /* The partitions' files, written now so that their pages are cached, removed at exit */
    char *block = malloc(1 << 20);
    unsigned long long x = 88172645463325252ULL;
    for (int i = 0; i < (1 << 20) / 8; i++) { x ^= x << 13; x ^= x >> 7; x ^= x << 17; memcpy(block + 8 * i, &x, 8); }
    for (int p = 0; p < partitions; p++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/sendfile-floor-%d-XXXXXX", dir, p);
        files[p] = mkstemp(path);
        if (files[p] < 0) die(path);
        unlink(path);
        for (long long done = 0; done < file_size;) {
            long long n = file_size - done < (1 << 20) ? file_size - done : (1 << 20);
            if (write(files[p], block, n) != n) die("write");
            done += n;
        }
        if (fsync(files[p]) < 0) die("fsync");  /* no writeback during the runs; the pages stay cached */
    }
    copy_buffer = block;
    if (chunk > (1 << 20) || (chunk == 0 && fetch_bytes > (1 << 20) && strcmp(mode, "copy") == 0)) {
        copy_buffer = malloc(chunk ? chunk : fetch_bytes);
    }
    if (strcmp(mode, "splice") == 0) {
        if (pipe(pipe_fds) < 0) die("pipe");
        fcntl(pipe_fds[0], F_SETPIPE_SZ, 1 << 20);
    }
    listener = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001)};
    socklen_t alen = sizeof a;
    if (cc_on_listener) set_cc(listener);
    if (bind(listener, (struct sockaddr *)&a, sizeof a) < 0 || listen(listener, 4) < 0) die("listen");
    getsockname(listener, (struct sockaddr *)&a, &alen);
    port = ntohs(a.sin_port);
    double su[MAX_REPS], ss[MAX_REPS], ru[MAX_REPS], rs[MAX_REPS], mbs[MAX_REPS], total[MAX_REPS];
    for (int r = 0; r < reps; r++) {
        struct result res = {0};
        pthread_t t;
        if (pthread_create(&t, NULL, reader, &res)) die("pthread_create");
        serve(&res);
        pthread_join(t, NULL);
        double gb = res.bytes / 1e9;
        su[r] = res.su / gb, ss[r] = res.ss / gb, ru[r] = res.ru / gb, rs[r] = res.rs / gb;
        total[r] = su[r] + ss[r];
        mbs[r] = res.bytes / res.seconds / 1e6;
        printf("rep=%d bytes=%lld seconds=%.6f sender_user=%.3f sender_sys=%.3f reader_user=%.3f reader_sys=%.3f"
               " answers=%lld sender_switches=%lld+%lld\n", r, res.bytes, res.seconds, su[r], ss[r], ru[r], rs[r],
               res.answers, res.vcsw, res.ivcsw);
        fflush(stdout);
    }
    printf("summary:");
    summary("mb_s", mbs, reps);
    summary("sender_user", su, reps);
    summary("sender_sys", ss, reps);
    summary("sender_total", total, reps);
    summary("reader_user", ru, reps);
    summary("reader_sys", rs, reps);
    printf("\n");
    return 0;
}
