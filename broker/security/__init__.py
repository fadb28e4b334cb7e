"""Who a client is and what it may do: listeners' security protocols, SASL authentication, the
authorizer and its ACLs (docs/security.md)."""
