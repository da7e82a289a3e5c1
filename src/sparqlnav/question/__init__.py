"""What a question asks for and mentions: answer-type intent and entity/relation linking."""
