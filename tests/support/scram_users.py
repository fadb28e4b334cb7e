"""SCRAM users made as an operator makes them with a Kafka admin client (confluent-kafka's
AlterUserScramCredentials), over a listener that needs no authentication."""

from __future__ import annotations

from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

MECHANISMS = {"SCRAM-SHA-256": ScramMechanism.SCRAM_SHA_256, "SCRAM-SHA-512": ScramMechanism.SCRAM_SHA_512}


def create_scram_user(bootstrap: str, user: str, password: str, mechanism: str = "SCRAM-SHA-512",
                      iterations: int = 4096) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    info = ScramCredentialInfo(MECHANISMS[mechanism], iterations)
    for future in admin.alter_user_scram_credentials(
            [UserScramCredentialUpsertion(user, info, password.encode())]).values():
        future.result(timeout=10)
