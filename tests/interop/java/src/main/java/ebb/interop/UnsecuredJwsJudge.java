package ebb.interop;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.List;

import org.apache.kafka.common.security.oauthbearer.internals.unsecured.OAuthBearerIllegalTokenException;
import org.apache.kafka.common.security.oauthbearer.internals.unsecured.OAuthBearerUnsecuredJws;
import org.apache.kafka.common.security.oauthbearer.internals.unsecured.OAuthBearerValidationUtils;

/**
 * Kafka's own judgement of unsecured JWS tokens, for tests/differential/test_unsecured_jws_against_kafka.py:
 * one token a line on stdin, one verdict a line on stdout, with the checks and in the order of
 * OAuthBearerUnsecuredValidatorCallbackHandler (principal claim "sub", scope claim "scope", no clock skew).
 * Arguments: the time in ms, then the required scope items.
 * Verdicts: "OK <principal>" (line breaks as "~"), "SCOPE" (insufficient_scope), "REJ" (invalid_token),
 * "FAIL" (anything else Kafka throws: the exchange fails without a challenge).
 */
public final class UnsecuredJwsJudge {
    public static void main(String[] args) throws Exception {
        long now = Long.parseLong(args[0]);
        List<String> required = List.of(args).subList(1, args.length);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        StringBuilder out = new StringBuilder();
        for (String token = in.readLine(); token != null; token = in.readLine()) {
            out.append(verdict(token, now, required)).append('\n');
        }
        System.out.write(out.toString().getBytes(StandardCharsets.UTF_8));
        System.out.flush();
    }

    private static String verdict(String token, long now, List<String> required) {
        try {
            OAuthBearerUnsecuredJws jws = new OAuthBearerUnsecuredJws(token, "sub", "scope");
            OAuthBearerValidationUtils.validateClaimForExistenceAndType(jws, true, "sub", String.class)
                    .throwExceptionIfFailed();
            OAuthBearerValidationUtils.validateIssuedAt(jws, false, now, 0).throwExceptionIfFailed();
            OAuthBearerValidationUtils.validateExpirationTime(jws, now, 0).throwExceptionIfFailed();
            OAuthBearerValidationUtils.validateTimeConsistency(jws).throwExceptionIfFailed();
            OAuthBearerValidationUtils.validateScope(jws, required).throwExceptionIfFailed();
            return "OK " + jws.principalName().replace('\r', '~').replace('\n', '~');
        } catch (OAuthBearerIllegalTokenException e) {
            return e.reason().failureScope() != null ? "SCOPE" : "REJ";
        } catch (RuntimeException e) {
            return "FAIL";
        }
    }
}
