package io.slipstream.hadoop.rpc;

import org.apache.hadoop.io.Text;
import org.apache.hadoop.security.token.delegation.AbstractDelegationTokenIdentifier;
import org.apache.hadoop.security.token.delegation.AbstractDelegationTokenSecretManager;
import org.apache.hadoop.security.token.delegation.AbstractDelegationTokenSelector;

/**
 * Delegation tokens for {@link SecureEcho}, built the way HDFS builds its own (a kind of its own on Hadoop's
 * abstract delegation-token classes): the server's secret manager issues and checks them with rolling
 * master keys, and the client's selector picks the token of this kind for the server's address.
 */
final class EchoTokens {
    static final Text KIND = new Text("SLIPSTREAM_ECHO_DELEGATION_TOKEN");

    private EchoTokens() {
    }

    static final class Identifier extends AbstractDelegationTokenIdentifier {
        /** For the secret manager, which reads an identifier off the wire into a fresh one. */
        Identifier() {
        }

        Identifier(Text owner, Text renewer, Text realUser) {
            super(owner, renewer, realUser);
        }

        @Override
        public Text getKind() {
            return KIND;
        }
    }

    static final class SecretManager extends AbstractDelegationTokenSecretManager<Identifier> {
        SecretManager() {
            // Key update interval, token lifetime, renewal interval, expired-token scan interval (ms).
            super(3_600_000, 3_600_000, 3_600_000, 3_600_000);
        }

        @Override
        public Identifier createIdentifier() {
            return new Identifier();
        }
    }

    /** Named by {@link SecureEcho}'s {@code @TokenInfo}; Hadoop instantiates it by reflection. */
    public static final class Selector extends AbstractDelegationTokenSelector<Identifier> {
        public Selector() {
            super(KIND);
        }
    }
}
