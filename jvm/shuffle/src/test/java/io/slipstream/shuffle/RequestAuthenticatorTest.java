package io.slipstream.shuffle;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import static org.junit.jupiter.api.Assertions.assertTrue;

import io.slipstream.shuffle.RequestAuthenticator.ResponseMac;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Random;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;
import org.junit.jupiter.api.Test;

/**
 * The request header's layout, without a fabric: what a response's tag is bound to, and what it
 * covers in each {@link ResponseMac} mode.
 */
class RequestAuthenticatorTest {
    private static final int OP = 0x5301;
    private static final String SCOPE = "13562/job_1700000000000_0001";
    private static final String SECRET = "the job's secret";

    private static byte[] headerTag(RequestAuthenticator authenticator, ByteBuffer payload) {
        int end = authenticator.headerBytes();
        byte[] header = new byte[end];
        payload.duplicate().get(header);
        return Arrays.copyOfRange(header, end - RequestAuthenticator.TAG_BYTES, end);
    }

    /**
     * A scoped request's tag follows its scope: the response must be bound to that tag, not to the
     * scope's bytes (the scope is known to anyone; binding to it would let a response answer any
     * request of the job).
     */
    @Test
    void a_scoped_request_s_tag_is_the_one_after_its_scope() {
        RequestAuthenticator scoped = RequestAuthenticator.scoped("job_1700000000000_0001@nm-host:13562", "secret");
        ByteBuffer body = ByteBuffer.wrap("body".getBytes(StandardCharsets.UTF_8));
        ByteBuffer payload = scoped.seal(OP, body);
        byte[] tag = scoped.requestTag(payload.duplicate());
        assertArrayEquals(headerTag(scoped, payload), tag);
        ByteBuffer response = scoped.sealResponse(OP, tag, ByteBuffer.wrap(new byte[] {1, 2, 3}));
        assertEquals(3, scoped.openResponse(OP, tag, response.duplicate()).remaining());
        byte[] otherTag = scoped.requestTag(scoped.seal(OP, ByteBuffer.wrap(new byte[] {9})));
        assertThrows(RequestAuthenticator.AuthenticationException.class,
                () -> scoped.openResponse(OP, otherTag, response.duplicate()),
                "a response bound to another request of the same scope");
    }

    @Test
    void an_unscoped_request_s_tag_follows_version_and_flags() {
        RequestAuthenticator plain = new RequestAuthenticator("secret");
        ByteBuffer payload = plain.seal(OP, ByteBuffer.wrap(new byte[] {7}));
        assertArrayEquals(headerTag(plain, payload), plain.requestTag(payload.duplicate()));
    }

    // ---- response MAC modes ----

    /** A FETCH response body: an index record (24 bytes) and a data block of 100 000, as a server lays them out. */
    private static ByteBuffer fetchResponse(int tagBytes) {
        byte[] index = new byte[24];
        byte[] data = new byte[100_000];
        new Random(7).nextBytes(index);
        new Random(8).nextBytes(data);
        ByteBuffer out = ByteBuffer.allocate(tagBytes + 4 + 2 * 12 + index.length + data.length);
        out.position(tagBytes);
        out.putInt(2).putLong(index.length).putInt(index.length).putLong(data.length).putInt(data.length);
        out.put(index).put(data);
        return out.flip();
    }

    private static final int INDEX_AT = RequestAuthenticator.TAG_BYTES + 4 + 2 * 12;
    private static final int DATA_AT = INDEX_AT + 24;

    /** What a server does: the response signed in the mode the request asked for. */
    private static ByteBuffer signedFetchResponse(RequestAuthenticator server, ByteBuffer request) {
        ByteBuffer response = fetchResponse(RequestAuthenticator.TAG_BYTES);
        server.signResponse(OP, server.requestTag(request.duplicate()), server.responseMacOf(request.duplicate()), response.duplicate(),
                ShuffleProtocol.fetchResponseCoverage(2));
        return response;
    }

    private static ByteBuffer open(RequestAuthenticator reader, ByteBuffer request, ByteBuffer response) {
        return reader.openResponse(OP, reader.requestTag(request.duplicate()), response.duplicate(), ShuffleProtocol.fetchResponseCoverage(2));
    }

    private static ByteBuffer copyOf(ByteBuffer buffer) {
        return ByteBuffer.allocate(buffer.remaining()).put(buffer.duplicate()).flip();
    }

    private static ByteBuffer flipped(ByteBuffer response, int at) {
        ByteBuffer copy = copyOf(response);
        return copy.put(at, (byte) ~copy.get(at));
    }

    @Test
    void header_mode_covers_the_header_and_index_records_not_the_data() {
        RequestAuthenticator reader = RequestAuthenticator.scoped(SCOPE, SECRET, ResponseMac.HEADER);
        RequestAuthenticator server = RequestAuthenticator.scoped(SCOPE, SECRET, ResponseMac.HEADER);
        ByteBuffer request = reader.seal(OP, ByteBuffer.wrap(new byte[] {1, 2, 3}));
        server.open(OP, request.duplicate());
        assertEquals(ResponseMac.HEADER, server.responseMacOf(request.duplicate()));
        ByteBuffer response = signedFetchResponse(server, request);
        assertEquals(response.remaining() - RequestAuthenticator.TAG_BYTES, open(reader, request, response).remaining());
        // The data's byte is not covered: Hadoop's IFile CRC32 is its check (ResponseMacTest in jvm/mapreduce).
        open(reader, request, flipped(response, DATA_AT + 50_000));
        for (int at : new int[] {
            RequestAuthenticator.TAG_BYTES + 3, // the entry count
            RequestAuthenticator.TAG_BYTES + 4 + 12 + 7, // the data block's length
            RequestAuthenticator.TAG_BYTES + 4 + 12 + 8 + 3, // the bytes it returned
            INDEX_AT + 15, // the index record's raw length
            5, // the tag itself
        }) {
            assertThrows(RuntimeException.class, () -> open(reader, request, flipped(response, at)), "byte " + at + " altered");
        }
        ByteBuffer cut = response.duplicate().limit(response.limit() - 1);
        assertThrows(RuntimeException.class, () -> open(reader, request, cut), "a response cut short");
        ByteBuffer otherRequest = reader.seal(OP, ByteBuffer.wrap(new byte[] {9}));
        assertThrows(RequestAuthenticator.AuthenticationException.class, () -> open(reader, otherRequest, response),
                "bound to its request in this mode too");
    }

    @Test
    void full_mode_covers_every_byte() {
        RequestAuthenticator reader = RequestAuthenticator.scoped(SCOPE, SECRET, ResponseMac.FULL);
        RequestAuthenticator server = RequestAuthenticator.scoped(SCOPE, SECRET, ResponseMac.HEADER);
        ByteBuffer request = reader.seal(OP, ByteBuffer.wrap(new byte[] {1, 2, 3}));
        server.open(OP, request.duplicate());
        assertEquals(ResponseMac.FULL, server.responseMacOf(request.duplicate()), "a server allowing header-only MACs answers as asked");
        ByteBuffer response = signedFetchResponse(server, request);
        open(reader, request, response);
        RequestAuthenticator.AuthenticationException altered = assertThrows(RequestAuthenticator.AuthenticationException.class,
                () -> open(reader, request, flipped(response, DATA_AT + 50_000)));
        assertTrue(altered.getMessage().contains("response authentication failed"), altered.getMessage());
    }

    /** A reader checks in its own mode: a response signed in the other never verifies, whatever the bytes. */
    @Test
    void a_response_in_the_other_mode_fails() {
        for (ResponseMac readerMode : ResponseMac.values()) {
            ResponseMac other = readerMode == ResponseMac.FULL ? ResponseMac.HEADER : ResponseMac.FULL;
            RequestAuthenticator reader = RequestAuthenticator.scoped(SCOPE, SECRET, readerMode);
            RequestAuthenticator server = RequestAuthenticator.scoped(SCOPE, SECRET, ResponseMac.HEADER);
            ByteBuffer request = reader.seal(OP, ByteBuffer.wrap(new byte[] {4}));
            ByteBuffer response = fetchResponse(RequestAuthenticator.TAG_BYTES);
            server.signResponse(OP, server.requestTag(request.duplicate()), other, response.duplicate(), ShuffleProtocol.fetchResponseCoverage(2));
            assertThrows(RequestAuthenticator.AuthenticationException.class, () -> open(reader, request, response),
                    "reader " + readerMode + ", response " + other);
        }
    }

    @Test
    void a_server_requiring_full_macs_refuses_a_request_for_header_only_ones_and_a_flipped_mode_fails_the_tag() {
        RequestAuthenticator headerReader = RequestAuthenticator.scoped(SCOPE, SECRET, ResponseMac.HEADER);
        RequestAuthenticator fullServer = RequestAuthenticator.scoped(SCOPE, SECRET, ResponseMac.FULL);
        ByteBuffer request = headerReader.seal(OP, ByteBuffer.wrap(new byte[] {5}));
        RequestAuthenticator.AuthenticationException refused = assertThrows(RequestAuthenticator.AuthenticationException.class,
                () -> fullServer.open(OP, request.duplicate()));
        assertTrue(refused.getMessage().contains("MACs every byte"), refused.getMessage());
        RequestAuthenticator headerServer = RequestAuthenticator.scoped(SCOPE, SECRET, ResponseMac.HEADER);
        headerServer.open(OP, request.duplicate());
        // The flags are the payload's second byte; flag 4 (header-only MACs) is covered by the tag.
        ByteBuffer downgraded = copyOf(request).put(1, (byte) (request.get(1) & ~4));
        assertThrows(RequestAuthenticator.AuthenticationException.class, () -> headerServer.open(OP, downgraded));
        ByteBuffer fullRequest = RequestAuthenticator.scoped(SCOPE, SECRET, ResponseMac.FULL).seal(OP, ByteBuffer.wrap(new byte[] {5}));
        ByteBuffer upgraded = copyOf(fullRequest).put(1, (byte) (fullRequest.get(1) | 4));
        assertThrows(RequestAuthenticator.AuthenticationException.class, () -> headerServer.open(OP, upgraded));
        headerServer.open(OP, fullRequest.duplicate());
        assertEquals(ResponseMac.FULL, headerServer.responseMacOf(fullRequest.duplicate()));
    }

    /**
     * Spark's authenticators (FULL, unscoped) tag requests and responses exactly as before the modes
     * existed: HMAC-SHA256 of the op and the body; of "R", the op, the request's tag and every byte.
     */
    @Test
    void full_mode_tags_are_the_ones_before_the_modes_existed() throws Exception {
        RequestAuthenticator spark = new RequestAuthenticator(SECRET);
        byte[] body = {10, 20, 30};
        ByteBuffer request = spark.seal(OP, ByteBuffer.wrap(body));
        assertEquals(1, request.get(1), "flags: tagged only");
        Mac mac = Mac.getInstance("HmacSHA256");
        mac.init(new SecretKeySpec(SECRET.getBytes(StandardCharsets.UTF_8), "HmacSHA256"));
        mac.update(new byte[] {(byte) (OP >>> 8), (byte) OP});
        byte[] requestTag = mac.doFinal(body);
        assertArrayEquals(requestTag, spark.requestTag(request.duplicate()));
        ByteBuffer response = spark.sealResponse(OP, requestTag, ByteBuffer.wrap(new byte[] {7, 8}));
        mac.update(new byte[] {'R', (byte) (OP >>> 8), (byte) OP});
        mac.update(requestTag);
        byte[] responseTag = mac.doFinal(new byte[] {7, 8});
        byte[] sent = new byte[RequestAuthenticator.TAG_BYTES];
        response.duplicate().get(sent);
        assertArrayEquals(responseTag, sent);
        assertEquals(ResponseMac.FULL, spark.responseMac());
    }
}
