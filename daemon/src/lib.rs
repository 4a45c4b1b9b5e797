//! The sender: serves test sessions and streams data at full speed on each data connection, sampling its side
