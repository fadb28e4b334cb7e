"""Who a client is and what it may do: listeners' security protocols, SASL authentication, the
authorizer and its ACLs (docs/security.md).

- listener_security.py: which security each listener asks for, and the settings Ebb refuses;
  tls.py (TLS listeners), dynamic_tls.py (their key material changed at runtime), passwords.py (which
  configs are secrets), sasl_config.py (what each SASL listener offers), inter_broker.py (how this
  broker reaches the others).
- sasl_session.py: one connection's SASL authentication; plain.py, scram.py (the mechanisms),
  credentials.py (SCRAM credentials in the metadata store), principal.py, errors.py.
- acls.py (Kafka's ACL model and the decision), authorizer.py (ACLs in the metadata store, held in
  memory), authorizer_config.py (whether requests are authorized, and the super users), access.py
  (the one question handlers ask).
"""
