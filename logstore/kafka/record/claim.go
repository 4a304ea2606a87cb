package record

// KindClaim is a record that holds no entry but marks where an owner epoch
// of a region begins in the log: logstore/kafka's Claim writes it after the
// claim is recorded in the claims topic, and the claim's offset is this
// record's. Its key is a version 2 key (the region, the new epoch > 0, seq
// 0, size and CRC of the value); its value is a short description of the
// claim for people reading the log (the owner's name), which no rule reads.
const KindClaim Kind = 6

// ClaimPart encodes a claim of region at epoch (> 0) as a KindClaim part.
func ClaimPart(region, epoch uint64, note []byte) Part {
	c := sum(note)
	return Part{Header: Header{Kind: KindClaim, Region: region, Epoch: epoch, Size: uint32(len(note)), EntryCRC: c.crc}, Data: note, crc: c}
}
