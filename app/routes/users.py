from __future__ import annotations

from typing import Annotated

from litestar import Controller, delete
from litestar.params import Parameter

from app.idempotency import answered, idempotent
from app.routes.deps import errors
from app.schemas import wire
from app.schemas_changes import ForgottenOut
from domain.limits import MAX_NAME
from domain.services import UserService

UserId = Annotated[str, Parameter(min_length=1, max_length=MAX_NAME, description="the user's id")]


class UserController(Controller):
    path = "/users"
    tags = ["users"]
    opt = idempotent()

    @delete("/{user_id:path}", summary="Forget a user: everything they own, in one transaction",
            responses=errors(400, 422), status_code=200,
            description=(
                "Deletes the user's sessions with their episodes and summaries, the user's entities and "
                "relationships, their keyword index rows and stored embeddings, in one transaction, and "
                "queues the deletion of their vectors. Answers how many records of each kind went; an "
                "unknown user answers zeros (idempotent, as mem0's `delete_all`). A user id with `/` is "
                "sent percent-encoded."
            ))
    async def forget(self, user_id: UserId, user_service: UserService) -> ForgottenOut:
        return await answered(lambda: user_service.forget(user_id.removeprefix("/")),
                              lambda counts: wire(counts, ForgottenOut), 200)
