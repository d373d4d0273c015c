package dev.ferry.transport;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.InvalidKeyException;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Arrays;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * A key both ends of a connection share, and the HMAC-SHA256 proofs made with it.
 *
 * <p>Connections open with a challenge in both directions: the dialing side sends a nonce, the
 * accepting side answers with its own nonce and {@code HMAC(secret, "ferry-server" | dialerNonce | acceptorNonce | id)},
 * and the dialing side answers with {@code HMAC(secret, "ferry-client" | acceptorNonce | dialerNonce | id)}.
 * The secret never travels; fresh nonces on both sides defeat replay. The fabric transport does
 * this on its control channel before it tells a peer any fabric address; the RPC layer does it
 * again per session.
 */
public final class SharedSecret {

    /** Environment variable (or system property) holding the secret itself. */
    public static final String ENV_SECRET = "FERRY_RPC_SECRET";
    /** Environment variable (or system property) naming a file that holds the secret. */
    public static final String ENV_SECRET_FILE = "FERRY_RPC_SECRET_FILE";
    /** Size of the nonces of the challenge. */
    public static final int NONCE_BYTES = 16;
    /** Size of a proof. */
    public static final int PROOF_BYTES = 32;

    private static final int MIN_BYTES = 16;
    private final byte[] key;

    private SharedSecret(byte[] key) {
        if (key.length < MIN_BYTES) {
            throw new IllegalArgumentException("a shared secret needs at least " + MIN_BYTES + " bytes, got " + key.length);
        }
        this.key = key.clone();
    }

    /** A secret of these bytes (at least 16). */
    public static SharedSecret of(byte[] key) {
        return new SharedSecret(key);
    }

    /** A secret of this text, UTF-8 encoded (at least 16 bytes). */
    public static SharedSecret of(String key) {
        return new SharedSecret(key.getBytes(StandardCharsets.UTF_8));
    }

    /** The secret in {@code file}, without a trailing newline. */
    public static SharedSecret fromFile(Path file) {
        try {
            byte[] bytes = Files.readAllBytes(file);
            int end = bytes.length;
            while (end > 0 && (bytes[end - 1] == '\n' || bytes[end - 1] == '\r')) {
                end--;
            }
            return new SharedSecret(Arrays.copyOf(bytes, end));
        } catch (IOException e) {
            throw new IllegalStateException("cannot read the shared secret from " + file + ": " + e.getMessage(), e);
        }
    }

    /**
     * The secret named by {@value #ENV_SECRET} or {@value #ENV_SECRET_FILE}, as a system property
     * or in the environment (properties first).
     *
     * @throws IllegalStateException if neither is set
     */
    public static SharedSecret fromEnvironment() {
        String value = setting(ENV_SECRET);
        if (value != null) {
            return of(value);
        }
        String file = setting(ENV_SECRET_FILE);
        if (file != null) {
            return fromFile(Path.of(file));
        }
        throw new IllegalStateException("no shared secret for authentication: set " + ENV_SECRET + " or "
                + ENV_SECRET_FILE + " (environment or system property), or configure RpcConfig.withSecret(...) "
                + "and TransportConfig.withSecret(...); only a demo may go without");
    }

    private static String setting(String name) {
        String value = System.getProperty(name);
        if (value == null || value.isEmpty()) {
            value = System.getenv(name);
        }
        return value == null || value.isEmpty() ? null : value;
    }

    /** {@code HMAC-SHA256(secret, label | a | b | clientId)}. */
    public byte[] proof(String label, byte[] a, byte[] b, long clientId) {
        try {
            Mac mac = Mac.getInstance("HmacSHA256");
            mac.init(new SecretKeySpec(key, "HmacSHA256"));
            mac.update(label.getBytes(StandardCharsets.US_ASCII));
            mac.update(a);
            mac.update(b);
            for (int i = 0; i < 8; i++) {
                mac.update((byte) (clientId >>> (8 * i)));
            }
            return mac.doFinal();
        } catch (NoSuchAlgorithmException | InvalidKeyException e) {
            throw new IllegalStateException("HmacSHA256 unavailable", e);
        }
    }

    /** Constant-time comparison of {@code proof} with the expected one. */
    public boolean verify(byte[] proof, String label, byte[] a, byte[] b, long clientId) {
        return proof != null && proof.length == PROOF_BYTES && MessageDigest.isEqual(proof, proof(label, a, b, clientId));
    }

    @Override
    public String toString() {
        return "SharedSecret[" + key.length + " bytes]";
    }
}
