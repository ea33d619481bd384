package io.slipstream.shuffle;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import org.junit.jupiter.api.Test;

/** The request header's layout, without a fabric: what a response's tag is bound to. */
class RequestAuthenticatorTest {
    private static final int OP = 0x5301;

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
}
