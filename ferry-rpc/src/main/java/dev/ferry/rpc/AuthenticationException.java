package dev.ferry.rpc;

/** The server refused this client's credentials, or the server could not prove it knows the secret. */
public class AuthenticationException extends RpcException {

    private static final long serialVersionUID = 1L;

    /** A refusal described by {@code message}. */
    public AuthenticationException(String message) {
        super(message);
    }
}
