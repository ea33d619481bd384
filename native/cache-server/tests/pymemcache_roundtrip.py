"""Every command type through pymemcache (Debian's python3-pymemcache), against a server on
127.0.0.1:PORT. Run with /usr/bin/python3 (the system Python that has the package):

    /usr/bin/python3 pymemcache_roundtrip.py PORT

Prints "ok" and exits 0 when every check holds; an AssertionError otherwise.
"""
import sys

from pymemcache.client.base import Client


def main(port):
    # default_noreply=False: every storage command waits for (and returns) the server's reply.
    c = Client(("127.0.0.1", port), default_noreply=False, connect_timeout=5, timeout=10)

    assert c.flush_all() is True

    # set / get / get_many
    assert c.set("alpha", b"1") is True
    assert c.get("alpha") == b"1"
    assert c.get("missing") is None
    assert c.set("beta", b"two", expire=100) is True
    assert c.set_many({"gamma": b"3", "delta": b"4"}) == []
    assert c.get_many(["alpha", "beta", "gamma", "delta", "missing"]) == {
        "alpha": b"1", "beta": b"two", "gamma": b"3", "delta": b"4"}
    big = bytes(i % 251 for i in range(300_000))
    assert c.set("big", big) is True
    assert c.get("big") == big

    # gets / cas
    value, cas = c.gets("alpha")
    assert value == b"1" and cas is not None
    assert c.cas("alpha", b"10", cas) is True
    assert c.cas("alpha", b"11", cas) is False        # stale cas: EXISTS
    assert c.cas("nothing", b"x", cas) is None         # no item: NOT_FOUND
    assert c.get("alpha") == b"10"
    many = c.gets_many(["alpha", "beta"])
    assert many["alpha"][0] == b"10" and many["beta"][0] == b"two"

    # add / replace
    assert c.add("alpha", b"nope") is False
    assert c.add("epsilon", b"5") is True
    assert c.replace("epsilon", b"55") is True
    assert c.replace("zeta", b"6") is False
    assert c.get("epsilon") == b"55"

    # append / prepend
    assert c.append("epsilon", b"+") is True
    assert c.prepend("epsilon", b"-") is True
    assert c.get("epsilon") == b"-55+"
    assert c.append("zeta", b"x") is False

    # incr / decr
    assert c.set("counter", b"10") is True
    assert c.incr("counter", 5) == 15
    assert c.decr("counter", 20) == 0
    assert c.incr("nocounter", 1) is None
    assert c.incr("counter", 2**64 - 1) == 2**64 - 1

    # delete
    assert c.delete("gamma") is True
    assert c.delete("gamma") is False
    assert c.delete_many(["delta", "beta"]) is True
    assert c.get("delta") is None

    # touch
    assert c.touch("alpha", 100) is True
    assert c.touch("nothing", 100) is False

    # stats / version
    stats = c.stats()
    assert int(stats[b"pid"]) > 0
    assert int(stats[b"curr_connections"]) >= 1
    assert int(stats[b"cmd_get"]) > 0
    version = c.version()
    assert version.startswith(b"1.6.18"), version

    # flush_all
    assert c.flush_all() is True
    assert c.get("alpha") is None
    assert c.get("big") is None

    c.close()
    print("ok")


if __name__ == "__main__":
    main(int(sys.argv[1]))
