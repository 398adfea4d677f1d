"""What the campaign concluded and what it cost: the verdict in one word and why, and the cost per accepted deliverable, shared by status, the room and the report so the three never disagree."""
