"""bench/fetch_syscalls.py reads perf's outputs: the calls counted by `perf stat -x ,`, and call-graph
samples split by the system call they were under (the function do_syscall_64 called, past newer
kernels' x64_sys_call dispatcher), sendfile's receive softirq apart, user and interrupt samples."""

from __future__ import annotations

from bench.fetch_syscalls import split_script, stat_calls

STAT = """# started on Sat Nov 28 03:00:00 2026

1234,,syscalls:sys_enter_sendfile64,1000000,100.00,,
0,,syscalls:sys_enter_fsync,1000000,100.00,,
<not counted>,,syscalls:sys_enter_poll,0,0.00,,
7,,syscalls:sys_enter_epoll_ctl,1000000,100.00,,
"""


def test_counted_calls():
    assert stat_calls(STAT) == {"sendfile64": 1234, "fsync": 0, "epoll_ctl": 7}


def _sample(tid: int, *frames: str) -> str:
    return f"{tid} \n" + "".join(f"\t{address} {symbol}\n" for address, symbol in
                                 (frame.split(" ", 1) for frame in frames)) + "\n"


SCRIPT = "".join([
    _sample(10, "ffffffff81000001 net_rx_action", "ffffffff81000002 do_splice_direct",
            "ffffffff81000003 __x64_sys_sendfile64", "ffffffff81000004 x64_sys_call",
            "ffffffff81000005 do_syscall_64", "ffffffff81000006 entry_SYSCALL_64_after_hwframe",
            "7f0000000001 __sendfile"),
    _sample(10, "ffffffff81000007 tcp_sendmsg_locked", "ffffffff81000003 __x64_sys_sendfile64",
            "ffffffff81000005 do_syscall_64", "7f0000000001 __sendfile"),
    _sample(10, "ffffffff81000008 rep_movs_alternative", "ffffffff81000009 do_preadv",
            "ffffffff81000005 do_syscall_64", "7f0000000002 preadv64v2"),
    _sample(10, "ffffffff8100000a __do_sys_getpid", "ffffffff81000005 do_syscall_64", "7f0000000003 getpid"),
    _sample(10, "ffffffff8100000b finish_task_switch", "ffffffff8100000c asm_sysvec_apic_timer_interrupt"),
    _sample(10, "7f0000000004 _PyEval_EvalFrameDefault", "7f0000000005 [unknown]"),
    _sample(11, "7f0000000004 _PyEval_EvalFrameDefault"),
])


def test_samples_split_by_thread_and_call():
    threads = split_script(SCRIPT)
    assert threads["11"] == {"user": 1}
    assert threads["10"] == {"user": 1, "kernel": 5, "sys:sendfile64": 2, "sendfile softirq": 1, "sys:do_preadv": 1,
                             "sys:getpid": 1, "irq": 1}
