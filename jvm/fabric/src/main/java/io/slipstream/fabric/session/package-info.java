/**
 * Authenticated fabric sessions for the RPC engines above (jvm/hadoop-rpc, jvm/hbase-rpc): the key
 * agreement that gives a session its key ({@link io.slipstream.fabric.session.SessionKeys}: X25519 and
 * HKDF-SHA256, the public keys carried by the engine's own discovery call), the MAC of each frame,
 * response and refusal ({@link io.slipstream.fabric.session.FrameAuth}: the 33-byte request prefix
 * {@code [version][session][sequence][MAC]} both engines share) and the replay check
 * ({@link io.slipstream.fabric.session.ReplayWindow}: 1024 sequence numbers and the numbers that left them
 * unseen, taken late).
 *
 * <p>JDK only, on purpose: it knows no engine (no Hadoop or HBase type, no user, no protocol), no
 * transport (it never sends or receives: the engines do) and no session table (each engine keeps its
 * sessions, ids and limits). An engine binds a session to the user its socket connection authenticated;
 * this package only lets the server prove that each frame comes from that session's client, once.
 */
package io.slipstream.fabric.session;
